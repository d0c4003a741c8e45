"""The pages and the feed a render publishes: each book's web player (player.py), the output root's catalogue
page and podcast feed (catalogue.py, library.py, feed.py).  Static files, written atomically, readable offline."""
