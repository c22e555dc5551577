"""What the tool reasons about: the typed input rows, the finding codes and findings, the
policy (a table or Cedar) and what it derives, and a finding's stable identity.

Nothing here reads a file a user gives or imports another part of the tool.
"""
