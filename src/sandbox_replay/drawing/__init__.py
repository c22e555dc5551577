"""Inline SVG drawing shared by the report site and the Markdown export.

``svg`` holds the text measuring and escaping every drawing uses; ``flowchart`` lays out
and draws the replay pipeline (with its Mermaid twin). Neither knows of pages or exports.
"""
