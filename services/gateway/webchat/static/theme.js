'use strict';
// Applies the remembered colour theme before the page paints (no flash of
// the wrong theme). Without a remembered choice the stylesheet follows the
// system's prefers-color-scheme; main.js owns the toggle.
(() => {
  try {
    const t = JSON.parse(localStorage.getItem('waggle.theme'));
    if (t === 'dark' || t === 'light') document.documentElement.dataset.theme = t;
  } catch (_) { /* no storage: follow the system */ }
})();
