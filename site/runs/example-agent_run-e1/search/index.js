SandboxReplaySearch.manifest({"count": 73, "parts": [
["0814846ef4d92c16","part-0001.js"]
]});
