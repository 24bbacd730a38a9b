"""Wikipedia dumps → pages, sentences and hyperlink-entity pairs (EASE's data)."""
