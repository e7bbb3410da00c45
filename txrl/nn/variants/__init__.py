"""Alternative transformer backbones for ablations, one module per paper.

Their settings and registry records are in :mod:`txrl.backbones` (one module per family,
of the same name); :func:`txrl.make_backbone` imports a module here when it builds one.
"""
