"""Pure Plotly figures for every stage of the decoder (numpy/pandas/plotly only: no torch, no streamlit).

``viz.api`` gathers the figure builders in one namespace. This file imports nothing: a package whose
``__init__`` imports its own modules can deadlock Python's import when two threads import it for the first time
at once (one entering ``viz.common`` directly, the other through the package), as the server's warm start and a
first page run do; ``tests/test_imports.py`` keeps every package so.
"""
