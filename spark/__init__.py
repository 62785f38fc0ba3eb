"""spark package of Elanus."""
