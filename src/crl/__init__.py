"""crl: contrastive representation learning for similarity search, with its statistical theory built in."""

__version__ = "0.1.0"
