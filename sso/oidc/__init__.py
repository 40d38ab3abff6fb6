"""allauth's OpenID Connect provider, made strict for customers' providers: a nonce, and the ID token's signature
checked against the provider's JWKS on every sign-in."""
