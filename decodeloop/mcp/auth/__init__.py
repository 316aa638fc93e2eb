"""Authorization for HTTP servers: oauth.py, OAuth 2.1 (discovery, client registration, PKCE, the token
request, scope step-up)."""
