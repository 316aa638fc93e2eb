"""Authorization for HTTP servers: oauth.py, OAuth 2.1 (discovery, client registration, PKCE, the token
request, scope step-up) and the grants of the authorization extensions: client_credentials.py (client
credentials, with a secret or private_key_jwt), workload.py (workload identity federation, the JWT bearer
grant), enterprise.py (enterprise-managed authorization: token exchange for an ID-JAG, then the JWT bearer
grant); dpop.py (DPoP-bound tokens and proofs); jwt.py (JWT signing, the one part that needs the `auth` extra)."""
