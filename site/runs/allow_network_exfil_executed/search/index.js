SandboxReplaySearch.manifest({"count": 31, "parts": [
["98ccb2a06b282ef6","part-0001.js"]
]});
