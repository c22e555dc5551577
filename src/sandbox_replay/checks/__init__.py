"""The checks of a replay: one module per layer, each taking the loaded run and returning
its findings and counts (``base``), the public trace and its audit (``trace``), and the
pipeline that runs them all and applies the pass rule (``pipeline``).
"""
