"""Moving between the app's pages in AppTest, as a link does (``?page=Compare``: the page script opens the page and
drops the parameter), and telling which page a run showed, by its title."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

TITLES = {  # a word each page's title holds, and no other page's
    "Learn": "Learn: how a decoder writes a translation",
    "Compare": "Compare two sentences",
    "About": "About Decoder Lens",
    "Explore": "Decoder Lens",
}


def open_page(at: AppTest, name: str) -> AppTest:
    at.query_params["page"] = name
    return at.run()


def shown_page(at: AppTest) -> str:
    title = at.title[0].value
    return next(name for name, text in TITLES.items() if text in title)
