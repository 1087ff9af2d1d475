"""The DP-GP-LVM variant of the GPLVM family (seed 001);
see :mod:`gplvm.models.gplvm_family.variants`."""
