"""Checks that a generated package is sound: static checks, its own tests, calibration."""
