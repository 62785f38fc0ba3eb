"""index package of Elanus."""
