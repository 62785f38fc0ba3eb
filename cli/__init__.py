"""cli package of Elanus."""
