'use strict';
// Text from a model or a server goes on a page as text only: put with textContent, never parsed as markup,
// with every control, format and invisible character (untrusted.UNSAFE_RANGES, filled in by html.py)
// spelled as the terminal spells it. The viewer's page and the studio's both start with this.
const $ = id => document.getElementById(id);
const UNSAFE = /__UNSAFE__/gu;
function hex(n, width) { return n.toString(16).padStart(width, '0'); }
function vis(s) {
  return String(s).replace(UNSAFE, c => {
    const n = c.codePointAt(0);
    if (c === '\r') return '\\r';
    return n < 0x100 ? '\\x' + hex(n, 2) : n < 0x10000 ? '\\u' + hex(n, 4) : '\\U' + hex(n, 8);
  });
}
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = vis(text);
  return e;
}
