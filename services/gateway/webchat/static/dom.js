// Small DOM helpers, the error banner and scrolling: every string the page
// shows goes through el() as text, never as markup.

export const $ = id => document.getElementById(id);

// ---- errors and small DOM helpers ----------------------------------

export function showError(err) {
  const status = err.status ? err.status + ' · ' : '';
  const code = err.code ? ' (' + err.code + ')' : '';
  $('error-text').textContent = status + (err.message || String(err)) + code;
  $('error').hidden = false;
}

export function hideError() { $('error').hidden = true; }

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

export function button(label, cls, onClick) {
  const b = el('button', cls, label);
  b.type = 'button';
  b.addEventListener('click', onClick);
  return b;
}

export function pretty(v) {
  if (typeof v === 'string') return v;
  try { return JSON.stringify(v, null, 2); } catch (_) { return String(v); }
}

export function nearBottom() {
  const m = $('messages');
  return m.scrollHeight - m.scrollTop - m.clientHeight < 160;
}

// scrollDown follows new content while the reader is at the bottom; one
// who scrolled up to read stays put and gets a "Latest" button instead.
export function scrollDown() {
  const m = $('messages');
  if (nearBottom()) m.scrollTop = m.scrollHeight;
  $('jump').hidden = nearBottom();
}

export function jumpToLatest() {
  const m = $('messages');
  m.scrollTop = m.scrollHeight;
  $('jump').hidden = true;
}

// cleanTitle shows an auto-title (the first message, cut short by the
// server) without its Markdown: no **, backticks, heading marks or link
// targets in the sidebar.
export function cleanTitle(t) {
  if (typeof t !== 'string') return String(t ?? '');
  const c = t
    .replace(/!?\[([^\]]*)\]\([^)]*\)?/g, '$1')
    .replace(/(\*\*|__|~~|`+)/g, '')
    .replace(/(^|\s)[*_]+(?=\S)|(?<=\S)[*_]+(?=\s|$)/g, '$1')
    .replace(/^\s{0,3}(#{1,6}|>|[-+*]|\d+[.)])\s+/, '')
    .replace(/\s+/g, ' ')
    .trim();
  return c || t;
}
