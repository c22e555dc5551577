SandboxReplaySearch.manifest({"count": 25, "parts": [
["8f148df5d27c2b1e","part-0001.js"]
]});
