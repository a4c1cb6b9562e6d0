// The handout's figures (viz/handout.py): drawn when they scroll near, each saved as PNG (Plotly's camera) or SVG
// (a button added to its toolbar), each position's all together as one ZIP of both. Nothing is fetched.
(() => {
  const FIGURES = JSON.parse(document.getElementById("figures").textContent);
  const WIDE = 1000; // a figure that takes its column's width is saved this wide
  const STRETCH_MIN_W = 600;

  function figure(ref) {
    return structuredClone(FIGURES[ref]); // Plotly writes into what it draws
  }

  function size(fig) {
    return { width: fig.layout.width || WIDE, height: fig.layout.height || 450 };
  }

  function config(name) {
    return {
      displaylogo: false,
      showSendToCloud: false,
      toImageButtonOptions: { format: "png", scale: 2, filename: name },
      modeBarButtonsToAdd: [
        {
          name: "Download plot as an SVG",
          icon: Plotly.Icons.disk,
          click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: name }),
        },
      ],
    };
  }

  function draw(div) {
    const fig = figure(div.dataset.ref);
    // as in the app: square cells keep their width, and a full-width heatmap is at least STRETCH_MIN_W wide (on a
    // phone it scrolls inside its frame rather than squeezing its cells)
    // (or the width the figure asks for: layout.meta.min_width, views/plot.js's rule)
    const own = fig.layout.meta?.min_width;
    if (fig.layout.width) div.style.width = fig.layout.width + "px";
    else if (typeof own === "number") div.style.minWidth = own + "px";
    else if (fig.data.some((t) => t.type === "heatmap")) div.style.minWidth = STRETCH_MIN_W + "px";
    Plotly.newPlot(div, fig.data, fig.layout, { ...config(div.dataset.name), responsive: !fig.layout.width }).catch(
      (err) => console.error("Handout figure:", err),
    );
  }

  const near = new IntersectionObserver(
    (entries) => {
      for (const e of entries) {
        if (!e.isIntersecting) continue;
        near.unobserve(e.target);
        draw(e.target);
      }
    },
    { rootMargin: "600px 0px" },
  );
  for (const div of document.querySelectorAll(".plot")) near.observe(div);

  // An equation wider than a phone scrolls in its frame: a frame that scrolls is a keyboard stop (Tab, then the
  // arrow keys), one that does not is none.
  function equationStops() {
    for (const eq of document.querySelectorAll(".eq")) eq.tabIndex = eq.scrollWidth > eq.clientWidth + 1 ? 0 : -1;
  }
  equationStops();
  addEventListener("resize", equationStops);

  // A ZIP file of stored (uncompressed) entries: PNG is compressed already, and SVG is small beside it.
  const CRC = new Uint32Array(256).map((_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });

  function crc32(bytes) {
    let c = 0xffffffff;
    for (const b of bytes) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  }

  function zip(files) {
    const enc = new TextEncoder();
    const parts = [], central = [];
    let offset = 0;
    for (const { name, bytes } of files) {
      const n = enc.encode(name), crc = crc32(bytes);
      const head = new DataView(new ArrayBuffer(30));
      head.setUint32(0, 0x04034b50, true);
      head.setUint16(4, 20, true);
      head.setUint16(6, 0x0800, true); // UTF-8 names
      head.setUint32(14, crc, true);
      head.setUint32(18, bytes.length, true);
      head.setUint32(22, bytes.length, true);
      head.setUint16(26, n.length, true);
      const dir = new DataView(new ArrayBuffer(46));
      dir.setUint32(0, 0x02014b50, true);
      dir.setUint16(4, 20, true);
      dir.setUint16(6, 20, true);
      dir.setUint16(8, 0x0800, true);
      dir.setUint32(16, crc, true);
      dir.setUint32(20, bytes.length, true);
      dir.setUint32(24, bytes.length, true);
      dir.setUint16(28, n.length, true);
      dir.setUint32(42, offset, true);
      parts.push(head, n, bytes);
      central.push(dir, n);
      offset += 30 + n.length + bytes.length;
    }
    const size = central.reduce((s, p) => s + p.byteLength, 0);
    const end = new DataView(new ArrayBuffer(22));
    end.setUint32(0, 0x06054b50, true);
    end.setUint16(8, files.length, true);
    end.setUint16(10, files.length, true);
    end.setUint32(12, size, true);
    end.setUint32(16, offset, true);
    return new Blob([...parts, ...central, end], { type: "application/zip" });
  }

  function bytesOf(url) {
    // Plotly's images as data URLs: SVG URI-encoded, PNG base64.
    const [head, body] = [url.slice(0, url.indexOf(",")), url.slice(url.indexOf(",") + 1)];
    if (head.endsWith(";base64")) return Uint8Array.from(atob(body), (ch) => ch.charCodeAt(0));
    return new TextEncoder().encode(decodeURIComponent(body));
  }

  let zipping = Promise.resolve(); // a ZIP being made (the print's images are made meanwhile only when it is done)

  async function pngOf(svgUrl, { width, height }) {
    // as Plotly makes a PNG (its SVG drawn on a canvas), without drawing the figure a second time
    const img = new Image();
    img.src = svgUrl;
    await img.decode();
    const canvas = Object.assign(document.createElement("canvas"), { width: 2 * width, height: 2 * height });
    canvas.getContext("2d").drawImage(img, 0, 0, canvas.width, canvas.height);
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/png"));
    return new Uint8Array(await blob.arrayBuffer());
  }

  async function download(button) {
    const section = button.closest("section");
    const k = button.dataset.position;
    button.disabled = true;
    let done;
    zipping = new Promise((resolve) => (done = resolve)); // the print's images wait: the reader waits for this
    try {
      const files = [];
      for (const div of section.querySelectorAll(".plot")) {
        // the SVG the print uses (made once, most often made already), and the PNG drawn from it at twice its size
        const svg = await imageOf(div.dataset.ref);
        files.push({ name: `${div.dataset.name}.svg`, bytes: bytesOf(svg) });
        files.push({ name: `${div.dataset.name}.png`, bytes: await pngOf(svg, size(FIGURES[div.dataset.ref])) });
      }
      const a = Object.assign(document.createElement("a"), {
        href: URL.createObjectURL(zip(files)),
        download: `position${k}_figures.zip`,
      });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 60_000);
    } catch (err) {
      console.error("Handout ZIP:", err);
    } finally {
      done();
      button.disabled = false;
    }
  }

  for (const button of document.querySelectorAll("button.zip")) button.addEventListener("click", () => download(button));

  // For print, every figure as an image (SVG: it prints sharp), made one after another from the page's load, each
  // distinct figure once; the Print button waits until all are there. The print stylesheet shows the images in
  // place of the interactive figures, a position to a page.
  const images = new Map(); // ref -> Promise of its image's URL
  function imageOf(ref) {
    if (!images.has(ref)) {
      const fig = figure(ref);
      images.set(ref, Plotly.toImage({ data: fig.data, layout: fig.layout }, { format: "svg", ...size(fig) }));
    }
    return images.get(ref);
  }

  const state = document.querySelector(".print-state");
  async function forPrint() {
    const divs = [...document.querySelectorAll(".plot")];
    let done = 0;
    for (const div of divs) {
      await zipping;
      const img = Object.assign(document.createElement("img"), { className: "print-figure", alt: "" }); // the caption says it
      try {
        img.src = await imageOf(div.dataset.ref);
        await img.decode();
      } catch (err) {
        console.error("Handout print image:", err);
      }
      div.closest(".frame").after(img);
      done += 1;
      if (state && done % 20 === 0) state.textContent = `${done} of ${divs.length} figures ready to print`;
      if (done % 10 === 0) await new Promise((r) => setTimeout(r, 0)); // the page stays responsive meanwhile
    }
    if (state) state.textContent = `All ${divs.length} figures are ready to print.`;
    document.documentElement.dataset.printReady = String(divs.length);
  }
  const printable = forPrint();
  document.querySelector("button.print")?.addEventListener("click", async () => {
    if (state && !document.documentElement.dataset.printReady) state.textContent = "Drawing every figure for the print…";
    await printable;
    window.print();
  });
})();
