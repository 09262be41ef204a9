// The token dialog: a team server's user token, or a local server's
// access token when the page is opened from another machine.

import { api } from './api.js';
import { $ } from './dom.js';
import { state, store } from './state.js';

// ---- token (team mode) ---------------------------------------------

let tokenWaiters = [];

export function askToken(why) {
  const dlg = $('token-dialog');
  $('token-error').hidden = !why;
  $('token-error').textContent = why || '';
  if (!dlg.open) dlg.showModal();
  $('token-input').focus();
  return new Promise(resolve => tokenWaiters.push(resolve));
}

export async function saveToken(e) {
  e.preventDefault();
  const tok = $('token-input').value.trim();
  if (!tok) return;
  state.token = tok;
  try {
    await api('GET', '/api/workspaces');
  } catch (err) {
    $('token-error').textContent = err.status === 401 ? 'That token is not valid.' : err.message;
    $('token-error').hidden = false;
    return;
  }
  store.set('token', tok);
  $('sign-out').hidden = false;
  $('token-input').value = '';
  $('token-dialog').close();
  const waiters = tokenWaiters;
  tokenWaiters = [];
  waiters.forEach(w => w());
}
