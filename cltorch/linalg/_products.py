"""``torch.linalg``'s norms and products half (filled by its own work item)."""
__all__ = []
