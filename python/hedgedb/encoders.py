"""Embed images with a trained model file, into the arrays DB.ingest and
DB.search take (docs/python.md, "Encoders"):

    import hedgedb, hedgedb.encoders
    model = hedgedb.encoders.Model("model.hdbm")
    with hedgedb.open("db") as db:
        db.create_collection("photos", **model.create_kwargs)
        db.ingest("photos", **model.embed_images(paths), labels=labels)
        res = db.search("photos", **model.embed_images(["query.png"], queries=True), k=5)

Needs a build with the encoders (LibTorch); importing loads LibTorch.
"""

try:
    from ._encoders import Model  # noqa: F401
except ImportError as e:  # a build without the encoders
    raise ImportError("hedgedb.encoders needs hedgedb built with the encoders "
                      f"(-DHEDGEDB_WITH_ENCODERS=ON): {e}") from e

__all__ = ["Model"]
