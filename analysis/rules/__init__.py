"""The rules every decision shares (pure): size bands, "were these runs measured the same way?"
(methodology) and "is B different from A?" (decision). Compare, fit, tune and doctor import
them; they import nothing else from analysis."""
