"""Role APIs: for each role, the requests it takes, the replies it gives, and a typed stub
callers use (``elanus/api/base.py`` says how one is made)."""
