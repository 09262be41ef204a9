// Waggle web chat, the page's entry module: theme, help, keys, layout,
// wiring of the controls, and boot. A client of the public HTTP API
// (docs/api.md) and nothing else; plain ES modules, no build step.

import { api } from './api.js';
import { refreshApprovals } from './approvals.js';
import { $, hideError, jumpToLatest, nearBottom, showError } from './dom.js';
import { filesState, loadFiles, probeFiles, upload } from './files.js';
import { moreKnowledge } from './knowledge.js';
import { loadMemory, togglePanel } from './memory.js';
import { cancelEdit, openSession } from './messages.js';
import { followNotifications } from './notify.js';
import { addVaultKey, loadModels, openSettings, saveAutonomy, saveModels } from './settings.js';
import { closeMenu, deleteWorkspace, loadSessions, loadTeams, loadWorkspaces, newChat, openMenu, selectWorkspace, showWorkspaceForm, submitWorkspace } from './sidebar.js';
import { state, store } from './state.js';
import { askToken, saveToken } from './token.js';
import { resume, send, stop } from './turn.js';

// ---- theme, help, keys ---------------------------------------------

function theme() {
  return document.documentElement.dataset.theme ||
    (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
}

function showTheme() {
  const dark = theme() === 'dark';
  $('theme').setAttribute('aria-label', dark ? 'Use the light theme' : 'Use the dark theme');
  $('theme').setAttribute('aria-pressed', String(dark));
}

// toggleTheme switches to the other theme and remembers the choice (until
// then the page follows the system's setting).
function toggleTheme() {
  const next = theme() === 'dark' ? 'light' : 'dark';
  document.documentElement.dataset.theme = next;
  store.set('theme', next);
  showTheme();
}

function showHelp() {
  const d = $('help-dialog');
  if (!d.open) d.showModal();
  $('help-close').focus();
}

// signOut forgets this browser's token (and what it had open) and starts
// over at the sign-in dialog.
function signOut() {
  ['token', 'session', 'workspace', 'turn'].forEach(k => store.del(k));
  state.leaving = true;
  location.reload();
}

function onKey(e) {
  const mod = e.ctrlKey || e.metaKey;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  if (document.querySelector('dialog[open]')) return; // a dialog has the keys
  if (mod && e.shiftKey && key === 'o') {
    e.preventDefault();
    newChat();
    return;
  }
  if (mod && !e.shiftKey && !e.altKey && key === 'k') {
    e.preventDefault();
    if (matchMedia('(max-width: 760px)').matches) document.body.classList.add('menu-open');
    $('search').focus();
    $('search').select();
    return;
  }
  if (e.key === 'Escape') {
    if (e.shiftKey) {
      e.preventDefault();
      $('input').focus();
      return;
    }
    // Escape in the rename field cancels the rename only.
    if (e.target.classList.contains('rename-input')) return;
    if (document.body.classList.contains('menu-open')) {
      closeMenu();
      return;
    }
    if (state.turn) {
      e.preventDefault();
      stop();
      return;
    }
    if (e.target === $('input')) cancelEdit(true);
    return;
  }
  if (mod || e.altKey || e.target.closest('input, textarea, select, [contenteditable]')) return;
  if (e.key === '/') {
    e.preventDefault();
    $('input').focus();
  } else if (e.key === '?') {
    e.preventDefault();
    showHelp();
  }
}

// bindUI wires the page's controls to their jobs.
function bindUI() {
  $('composer').addEventListener('submit', e => { e.preventDefault(); send(); });
  $('input').addEventListener('keydown', e => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $('stop').addEventListener('click', stop);
  $('new-session').addEventListener('click', newChat);
  $('workspace').addEventListener('change', async e => {
    await selectWorkspace(e.target.value);
    newChat();
  });
  $('new-workspace').addEventListener('click', () => showWorkspaceForm('create'));
  $('workspace-form').addEventListener('submit', submitWorkspace);
  $('rename-workspace').addEventListener('click', () => showWorkspaceForm('rename'));
  $('delete-workspace').addEventListener('click', deleteWorkspace);
  let searchTimer = 0;
  $('search').addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(loadSessions, 200);
  });
  $('approvals-toggle').addEventListener('click', () => {
    if (togglePanel('approvals')) refreshApprovals();
  });
  $('memory-toggle').addEventListener('click', () => {
    if (togglePanel('memory')) loadMemory();
  });
  $('knowledge-more').addEventListener('click', moreKnowledge);
  let memoryTimer = 0;
  $('memory-search').addEventListener('input', () => {
    clearTimeout(memoryTimer);
    memoryTimer = setTimeout(loadMemory, 250);
  });
  $('theme').addEventListener('click', toggleTheme);
  $('settings-button').addEventListener('click', openSettings);
  $('settings-models').addEventListener('submit', saveModels);
  $('settings-autonomy').addEventListener('submit', saveAutonomy);
  $('settings-vault-form').addEventListener('submit', addVaultKey);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) document.title = 'Waggle'; });
  $('files-toggle').addEventListener('click', () => {
    if (togglePanel('files')) loadFiles();
  });
  $('files-up').addEventListener('click', () => {
    filesState.dir = filesState.dir.replace(/\/[^/]*\/?$/, '') || '/';
    loadFiles();
  });
  $('attach').addEventListener('click', () => $('attach-input').click());
  $('attach-input').addEventListener('change', e => {
    upload([...e.target.files]);
    e.target.value = '';
  });
  // Drop files anywhere on the page to attach them.
  document.addEventListener('dragover', e => {
    if (!filesState.available || !e.dataTransfer || ![...e.dataTransfer.types].includes('Files')) return;
    e.preventDefault();
    document.body.classList.add('dropping');
  });
  document.addEventListener('dragleave', e => { if (!e.relatedTarget) document.body.classList.remove('dropping'); });
  document.addEventListener('drop', e => {
    document.body.classList.remove('dropping');
    if (!filesState.available || !e.dataTransfer || !e.dataTransfer.files.length) return;
    e.preventDefault();
    upload([...e.dataTransfer.files]);
  });
  $('model').addEventListener('change', e => {
    if (e.target.value) store.set('model', e.target.value);
    else store.del('model');
  });
  matchMedia('(prefers-color-scheme: dark)').addEventListener('change', showTheme);
  $('help-button').addEventListener('click', showHelp);
  $('sign-out').addEventListener('click', signOut);
  $('jump').addEventListener('click', jumpToLatest);
  $('messages').addEventListener('scroll', () => { $('jump').hidden = nearBottom(); });
  $('edit-cancel').addEventListener('click', () => { cancelEdit(true); $('input').focus(); });
  $('error-close').addEventListener('click', hideError);
  $('menu').addEventListener('click', openMenu);
  $('menu-close').addEventListener('click', closeMenu);
  $('scrim').addEventListener('click', closeMenu);
  document.addEventListener('keydown', onKey);
  $('token-form').addEventListener('submit', saveToken);
  $('token-dialog').addEventListener('cancel', e => e.preventDefault());
  window.addEventListener('pagehide', () => { state.leaving = true; });
}

async function health() {
  for (let i = 0; ; i++) {
    try {
      return await api('GET', '/health');
    } catch (err) {
      if (err.status !== 503 || i >= 40) throw err;
    }
    await new Promise(r => setTimeout(r, 500));
  }
}

async function boot() {
  bindUI();
  showTheme();
  let h = { mode: 'local' };
  let reached = false;
  try {
    h = await health();
    reached = true;
  } catch (err) {
    showError(err);
  }
  state.mode = h.mode || 'local';
  document.body.dataset.mode = state.mode;
  if (state.mode === 'team') {
    state.token = store.get('token');
    $('sign-out').hidden = false;
    if (!state.token) await askToken();
  } else {
    // /health hands the token only to this machine's own clients; from
    // elsewhere (a server bound beyond loopback) the user pastes it.
    state.token = h.wsToken || store.get('token') || null;
    // A pasted token can be forgotten again; /health's cannot.
    $('sign-out').hidden = !!h.wsToken || !state.token;
    if (!state.token && reached) {
      $('token-help').textContent = 'This Waggle server is on another machine. Paste its access token ' +
        '(on that machine: the wsToken field of http://127.0.0.1:<port>/health).';
      await askToken();
    }
  }
  $('status').textContent = h.offline ? 'echo mode' : (h.defaultModel || '');
  if (state.mode === 'team') await loadTeams();
  loadModels(h.defaultModel); // not awaited: the page works without it
  await loadWorkspaces();
  await probeFiles();
  const saved = store.get('turn');
  if (saved && saved.id) {
    refreshApprovals();
    await resume(saved);
  } else {
    const last = store.get('session');
    if (last && last.workspace === state.workspace) {
      await loadSessions();
      if (state.sessions.some(s => s.id === last.id)) await openSession(last.id);
    } else {
      await loadSessions();
    }
  }
  refreshApprovals();
  // Polled while hidden too (slower): a waiting approval is news.
  let polls = 0;
  setInterval(() => { if (!document.hidden || ++polls % 6 === 0) refreshApprovals(); }, 5000);
  followNotifications();
  document.body.dataset.ready = 'true';
}

boot();
