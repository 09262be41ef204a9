// The settings dialog (models and budget, autonomy, the vault, MCP
// servers) and the header's model picker.

import { api, enc } from './api.js';
import { $, button, el } from './dom.js';
import { state, store } from './state.js';

// ---- settings --------------------------------------------------------
// One dialog over the settings routes: models and budget (GET/PUT
// /api/settings), default autonomy (/api/settings/permissions), API keys
// (/api/vault: names only, a value is only ever sent), MCP servers' state
// (GET /api/mcp/servers). A section whose route is missing (404) or
// refused (403: not an operator) stays hidden.

// settingsError shows an error inside the dialog (the page's banner is
// behind it).
function settingsError(err) {
  const status = err.status ? err.status + ' · ' : '';
  $('settings-error').textContent = status + (err.message || String(err)) + (err.code ? ' (' + err.code + ')' : '');
  $('settings-error').hidden = false;
}

async function section(id, load) {
  try {
    await load();
    $(id).hidden = false;
  } catch (err) {
    $(id).hidden = true;
    if (err.status && err.status !== 404 && err.status !== 403) settingsError(err);
  }
}

export async function openSettings() {
  const d = $('settings-dialog');
  if (!d.open) d.showModal();
  $('settings-error').hidden = true;
  document.querySelectorAll('#settings-dialog .saved').forEach(s => { s.hidden = true; });
  await Promise.all([
    section('settings-models', async () => {
      const s = await api('GET', '/api/settings');
      $('settings-default-model').value = typeof s.defaultModel === 'string' ? s.defaultModel : '';
      $('settings-budget').value = typeof s.dailyBudget === 'number' ? String(s.dailyBudget) : '';
      $('settings-hard-cap').checked = s.budgetHardCap === true;
      $('settings-config-error').hidden = !s.configError;
      $('settings-config-error').textContent = s.configError ? 'config.json is not in force: ' + s.configError : '';
      const list = $('settings-model-list');
      list.replaceChildren();
      for (const o of $('model').options) if (o.value) list.append(Object.assign(el('option'), { value: o.value }));
    }),
    section('settings-autonomy', async () => {
      const p = await api('GET', '/api/settings/permissions');
      $('settings-autonomy-level').value = ['normal', 'trusted', 'yolo'].includes(p.defaultAutonomy) ? p.defaultAutonomy : 'normal';
    }),
    section('settings-vault', loadVault),
    section('settings-mcp', loadMCP),
  ]);
}

async function loadVault() {
  const r = await api('GET', '/api/vault');
  const ul = $('settings-vault-list');
  ul.replaceChildren();
  for (const s of (r && Array.isArray(r.secrets) ? r.secrets : [])) {
    if (!s || typeof s.name !== 'string') continue;
    const li = el('li');
    li.append(el('span', 'name', s.name), el('span', 'meta', String(s.type || '')));
    const del = button('Delete', 'delete', async () => {
      if (!del.classList.contains('confirm')) {
        del.classList.add('confirm');
        del.textContent = 'Delete it?';
        return;
      }
      try {
        await api('DELETE', '/api/vault/' + enc(s.name));
        await loadVault();
      } catch (err) {
        settingsError(err);
      }
    });
    li.append(del);
    ul.append(li);
  }
  if (!ul.children.length) ul.append(el('li', 'meta', 'No keys stored.'));
}

async function loadMCP() {
  const r = await api('GET', '/api/mcp/servers' + (state.workspace ? '?workspace=' + enc(state.workspace) : ''));
  const ul = $('settings-mcp-list');
  ul.replaceChildren();
  for (const s of (r && Array.isArray(r.servers) ? r.servers : [])) {
    if (!s || typeof s.name !== 'string') continue;
    const li = el('li');
    const tools = Array.isArray(s.tools) ? s.tools.length : 0;
    li.append(el('span', 'name', s.name), el('span', 'meta', [s.scope, s.transport, tools + (tools === 1 ? ' tool' : ' tools')].filter(Boolean).join(' · ')),
      el('span', 'mcp-state ' + String(s.state || ''), String(s.state || '')));
    if (s.error) li.append(el('div', 'error-text', String(s.error)));
    ul.append(li);
  }
  for (const e of (r && Array.isArray(r.configErrors) ? r.configErrors : [])) ul.append(el('li', 'error-text', String(e)));
  if (!ul.children.length) ul.append(el('li', 'meta', 'No MCP servers configured.'));
}

function showSaved(form) {
  form.querySelector('.saved').hidden = false;
}

export async function saveModels(e) {
  e.preventDefault();
  const budget = $('settings-budget').value.trim();
  const body = { budgetHardCap: $('settings-hard-cap').checked, dailyBudget: budget === '' ? null : Number(budget) };
  const model = $('settings-default-model').value.trim();
  if (model) body.defaultModel = model;
  try {
    await api('PUT', '/api/settings', body);
    showSaved(e.target);
  } catch (err) {
    settingsError(err);
  }
}

export async function saveAutonomy(e) {
  e.preventDefault();
  try {
    await api('PUT', '/api/settings/permissions', { defaultAutonomy: $('settings-autonomy-level').value });
    showSaved(e.target);
  } catch (err) {
    settingsError(err);
  }
}

export async function addVaultKey(e) {
  e.preventDefault();
  const name = $('settings-vault-name').value.trim();
  const value = $('settings-vault-value').value;
  if (!name || !value) return;
  try {
    await api('POST', '/api/vault', { name, value });
    $('settings-vault-name').value = '';
    $('settings-vault-value').value = '';
    await loadVault();
  } catch (err) {
    settingsError(err);
  }
}

// ---- model picker ----------------------------------------------------
// GET /api/litellm/models ({models: [id…]}) lists what the model server
// offers; the pick (remembered in this browser) is sent as the chat
// request's model. A server without the route (404), or with nothing to
// list, keeps the picker hidden and the server's default in use.

export async function loadModels(defaultModel) {
  let models = [];
  try {
    const r = await api('GET', '/api/litellm/models');
    models = (r && Array.isArray(r.models) ? r.models : []).filter(m => typeof m === 'string' && m);
  } catch (_) {
    models = [];
  }
  const sel = $('model');
  sel.replaceChildren();
  sel.dataset.loaded = 'true'; // the list has been asked for (tests wait on it)
  if (!models.length) {
    sel.hidden = true;
    return;
  }
  const def = el('option', '', 'Default' + (defaultModel ? ' (' + defaultModel + ')' : ''));
  def.value = '';
  sel.append(def);
  for (const m of models) {
    const o = el('option', '', m);
    o.value = m;
    sel.append(o);
  }
  const want = store.get('model');
  sel.value = models.includes(want) ? want : '';
  sel.hidden = false;
  $('status').hidden = true;
}
