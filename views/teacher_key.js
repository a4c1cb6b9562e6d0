// The teacher link's secret travels in the address's fragment (/class?c=ID#t=SECRET), which a browser never sends to
// a server: no access log (the app's, nginx's, an ingress's) ever holds it. Asked once per session of the Class page
// (data.ask, a nonce), this reads it, removes it from the address bar and hands it to the server, which trades it for
// a teacher session's token (views/teacher.py); the token handed back (data.token) is kept as this class's cookie
// (data.cookie), read by the server when the dashboard is opened again without the secret.
export default function ({ data: bytes, setTriggerValue }) {
  const data = JSON.parse(typeof bytes === "string" ? bytes : new TextDecoder().decode(bytes));
  if (data.token && data.cookie) {
    const secure = location.protocol === "https:" ? "; Secure" : "";
    document.cookie = `${data.cookie}=${data.token}; Path=/; Max-Age=${data.max_age}; SameSite=Strict${secure}`;
  }
  const asked = (window.__decoderLensTeacherAsked ||= new Set());
  if (!data.ask || asked.has(data.ask)) return;
  asked.add(data.ask);
  const m = location.hash.match(/[#&]t=([^&]*)/);
  if (m) history.replaceState(history.state, "", location.pathname + location.search);
  setTriggerValue("secret", m ? decodeURIComponent(m[1]) : "");
}
