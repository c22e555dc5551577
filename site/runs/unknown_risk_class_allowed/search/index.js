SandboxReplaySearch.manifest({"count": 32, "parts": [
["0fea7ba47f59acdd","part-0001.js"]
]});
