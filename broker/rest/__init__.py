"""The Flux RESTful API v1 on the lead broker: a drop-in for clients of flux-framework/flux-restful-api."""
