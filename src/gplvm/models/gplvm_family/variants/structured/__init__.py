"""The structured GPLVM variant on images (seed 003);
see :mod:`gplvm.models.gplvm_family.variants`."""
