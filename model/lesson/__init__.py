"""The guided lesson's content, computed from a model's trace: the worked example (lesson) and the chapters, their
questions and the two checks (learn). Numpy only; imports model.core."""
