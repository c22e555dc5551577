"""Inline SVG drawing shared by the report site and the Markdown export.

``svg`` measures and escapes text; ``layout`` lays out a small DAG; ``flowchart`` draws
the replay pipeline from it (with its Mermaid twin). None knows of pages or exports.
"""
