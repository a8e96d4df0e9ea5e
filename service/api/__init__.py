"""HTTP layer: app factory, routers, schemas, middleware and error mapping."""
