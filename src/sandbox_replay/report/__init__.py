"""The static report site: discover runs, replay them, build view-models, render, write."""
