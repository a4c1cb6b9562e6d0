"""The Streamlit UI: one module per page, one per stage section (stages/), and the URL-backed state."""
