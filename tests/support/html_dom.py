"""Parse a produced HTML page the way a browser tokenises it, with the standard library only."""

from __future__ import annotations

from html.parser import HTMLParser


class Inventory(HTMLParser):
    """What the browser would build from the HTML: elements, attributes, script and style bodies, text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self.styles: list[str] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self.scripts.append((dict(attrs), ""))
        if tag == "style":
            self.styles.append("")
        self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        current = self.stack[-1] if self.stack else ""
        if current == "script":
            attrs, body = self.scripts[-1]
            self.scripts[-1] = (attrs, body + data)
        elif current == "style":
            self.styles[-1] += data
        else:
            self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)


def inventory(html: str) -> Inventory:
    parser = Inventory()
    parser.feed(html)
    parser.close()
    return parser
