SandboxReplaySearch.manifest({"count": 31, "parts": [
["3eb5b9b84d205828","part-0001.js"]
]});
