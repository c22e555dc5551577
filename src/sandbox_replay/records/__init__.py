"""What a replay is written as: the result, board, receipt, acceptance and card
(``build``), the headline a run is summed up by (``headline``), the records' JSON
Schemas (``schemas``), and two builds' records compared (``changes``).
"""
