"""The playground page's static files (index.html, app.js, app.css): data, no code."""
