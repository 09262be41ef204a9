// The memory panel: the workspace's and the personal mind's frames,
// search, importance and delete; its Knowledge section is knowledge.js.

import { api, enc } from './api.js';
import { $, button, el, showError } from './dom.js';
import { loadKnowledge } from './knowledge.js';
import { state } from './state.js';

// ---- memory --------------------------------------------------------
// The memory panel lists what the agent and the user saved for this
// workspace (and the user's personal mind): search, importance, delete.

const importances = ['critical', 'important', 'normal', 'temporary', 'deprecated'];

export async function loadMemory() {
  // The Knowledge section follows the same workspace and search; it loads
  // beside the frames and shows its own errors.
  loadKnowledge();
  const ul = $('memory-list');
  if (!state.workspace) {
    ul.replaceChildren(el('li', 'meta', 'Create a workspace first.'));
    return;
  }
  const q = $('memory-search').value.trim();
  const ws = 'workspace=' + enc(state.workspace);
  let r;
  try {
    r = q
      ? await api('GET', '/api/memory/search?q=' + enc(q) + '&scope=all&limit=50&' + ws)
      : await api('GET', '/api/memory/frames?limit=100&' + ws);
  } catch (err) {
    showError(err);
    return;
  }
  const frames = (r && Array.isArray(r.results)) ? r.results.filter(f => f && typeof f.id === 'string') : [];
  ul.replaceChildren();
  for (const f of frames) ul.append(frameItem(f));
  if (!frames.length) ul.append(el('li', 'meta', q ? 'Nothing in memory matches.' : 'Nothing saved yet.'));
}

function frameItem(f) {
  const li = el('li', 'frame');
  li.dataset.id = f.id;
  li.append(el('div', 'frame-content', String(f.content ?? '')));
  const meta = el('div', 'frame-meta');
  const when = f.created_at || f.timestamp;
  const d = when ? new Date(when) : null;
  meta.append(el('span', '', (f.mind === 'personal' ? 'Personal' : 'Workspace') + ' · ' + String(f.source || '') +
    (d && !isNaN(d) ? ' · ' + d.toLocaleString() : '')));
  const sel = el('select', 'importance');
  sel.setAttribute('aria-label', 'Importance');
  for (const imp of importances) {
    const o = el('option', '', imp);
    o.value = imp;
    sel.append(o);
  }
  sel.value = importances.includes(f.importance) ? f.importance : 'normal';
  sel.addEventListener('change', async () => {
    try {
      await api('PUT', '/api/memory/frames/' + enc(f.id) + '?workspace=' + enc(state.workspace),
        { content: String(f.content ?? ''), importance: sel.value });
      f.importance = sel.value;
    } catch (err) {
      showError(err);
      sel.value = f.importance;
    }
  });
  const del = button('Delete', 'delete', async () => {
    if (!del.classList.contains('confirm')) {
      del.classList.add('confirm');
      del.textContent = 'Forget it?';
      return;
    }
    try {
      await api('DELETE', '/api/memory/frames/' + enc(f.id) + '?workspace=' + enc(state.workspace));
      li.remove();
    } catch (err) {
      showError(err);
    }
  });
  meta.append(sel, del);
  li.append(meta);
  return li;
}

export function togglePanel(id) {
  const panel = $(id);
  panel.hidden = !panel.hidden;
  $(id + '-toggle').setAttribute('aria-expanded', String(!panel.hidden));
  return !panel.hidden;
}
