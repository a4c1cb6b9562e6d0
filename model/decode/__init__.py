"""Decoding: the recorded loop (greedy, beam, batches), the numpy step and its compiled twin, the step records the
app draws, and the teacher-forced trace. Imports model.core and model.io."""
