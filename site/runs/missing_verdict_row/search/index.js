SandboxReplaySearch.manifest({"count": 30, "parts": [
["04c4fea844fb72b9","part-0001.js"]
]});
