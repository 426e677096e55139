"""The public home page and the live operator dashboard."""
