SandboxReplaySearch.manifest({"count": 37, "parts": [
["1ac250785e590998","part-0001.js"]
]});
