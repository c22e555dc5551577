"""What a replay is written as: the result, board, receipt, acceptance and card
(``build``), how input rows stand in the result (``recorded_rows``), the headline a run is
summed up by (``headline``), the records' JSON Schemas (``schemas``, ``result_schema``),
and two builds' records compared (``changes``).
"""
