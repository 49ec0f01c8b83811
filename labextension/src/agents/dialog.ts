// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * The dialogs of the agents: *Connect an Agent…* (create one, show its MCP
 * URL, its token once and the client configuration to paste) and *Manage
 * Agents…* (the user's agents, each with *Revoke*).
 */

import {
  Clipboard,
  Dialog,
  InputDialog,
  showDialog,
  showErrorMessage
} from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';
import { Widget } from '@lumino/widgets';

import type { IAgentModel, INewAgent } from './api';
import { createAgent, deleteAgent } from './api';
import { claudeCommand, clientConfigJson, mcpUrl } from './config';
import type { AgentsModel } from './model';
import { controlEnd } from './model';
import { button, listedNow, onClickCall } from './widgets';

/**
 * Ask for a name, create the agent and show how to connect it.
 *
 * @param model - The agents model (refreshed afterwards).
 * @param trans - The translation bundle.
 * @returns The new agent, or `null` when cancelled or refused (the user was
 *   told why).
 */
export async function connectAgent(
  model: AgentsModel,
  trans: TranslationBundle
): Promise<INewAgent | null> {
  const answer = await InputDialog.getText({
    title: trans.__('Connect an Agent'),
    label: trans.__(
      'A name for the agent (its notifications and terminals show it)'
    ),
    placeholder: trans.__('e.g. claude-code'),
    okLabel: trans.__('Create')
  });
  const name = answer.value?.trim();
  if (!answer.button.accept || !name) {
    return null;
  }
  let agent: INewAgent;
  try {
    agent = await createAgent(name, model.serverSettings);
  } catch (error) {
    await showErrorMessage(
      trans.__('Could not create the agent'),
      error as Error
    );
    return null;
  }
  void model.refresh().catch(() => undefined);
  await showDialog({
    title: trans.__('Agent "%1" created', agent.name),
    body: connectionInfo(agent, mcpUrl(model.serverSettings), trans),
    buttons: [Dialog.okButton({ label: trans.__('Done') })]
  });
  return agent;
}

/**
 * The body of the dialog after an agent was created: the MCP URL, the token
 * (shown this once) and the configuration for MCP clients, each with a
 * *Copy* button.
 *
 * @param agent - The new agent, with its token.
 * @param url - The MCP endpoint URL.
 * @param trans - The translation bundle.
 */
export function connectionInfo(
  agent: INewAgent,
  url: string,
  trans: TranslationBundle
): Widget {
  const body = new Widget();
  body.addClass('jp-ToolTerminal-agentConnect');
  const note = document.createElement('p');
  note.textContent = trans.__(
    'The agent is read-only until you allow it control, when it asks. Copy the token now: it is not shown again.'
  );
  body.node.append(
    note,
    copyable(trans.__('MCP URL'), url, 'url', trans),
    copyable(trans.__('Token'), agent.token, 'token', trans),
    copyable(
      trans.__('Client configuration (JSON)'),
      clientConfigJson(agent.name, url, agent.token),
      'json',
      trans
    ),
    copyable(
      trans.__('Claude Code'),
      claudeCommand(agent.name, url, agent.token),
      'claude',
      trans
    )
  );
  return body;
}

/**
 * Show the user's agents, each with *Revoke* (its token stops working and
 * its terminals end).
 *
 * @param model - The agents model.
 * @param trans - The translation bundle.
 * @returns Whether the user asked to connect a new agent.
 */
export async function manageAgents(
  model: AgentsModel,
  trans: TranslationBundle
): Promise<boolean> {
  const agents = await listedNow(model, trans);
  if (agents === null) {
    return false;
  }
  const body = new Widget();
  body.addClass('jp-ToolTerminal-agentList');
  if (agents.length === 0) {
    const empty = document.createElement('p');
    empty.textContent = trans.__('You have connected no agent yet.');
    body.node.appendChild(empty);
  }
  for (const agent of agents) {
    body.node.appendChild(agentRow(agent, model, trans));
  }
  const result = await showDialog({
    title: trans.__('Agents'),
    body,
    buttons: [
      Dialog.cancelButton({ label: trans.__('Close') }),
      Dialog.okButton({ label: trans.__('Connect an Agent…') })
    ]
  });
  return result.button.accept;
}

/**
 * What an agent may do now, for the list.
 *
 * @param agent - An agent.
 * @param trans - The translation bundle.
 * @param now - The time to judge by (ms since the epoch).
 */
export function agentState(
  agent: IAgentModel,
  trans: TranslationBundle,
  now: number = Date.now()
): string {
  const shared =
    agent.shared.length > 0
      ? trans._n(
          ', reads %1 shared terminal',
          ', reads %1 shared terminals',
          agent.shared.length
        )
      : '';
  if (controlEnd(agent) > now) {
    return trans.__(
      'in control until %1%2',
      new Date(controlEnd(agent)).toLocaleTimeString(),
      shared
    );
  }
  if (agent.request !== null) {
    return trans.__('asks for control%1', shared);
  }
  return trans.__('read-only%1', shared);
}

/**
 * One agent's row of the list, with *Revoke*.
 */
function agentRow(
  agent: IAgentModel,
  model: AgentsModel,
  trans: TranslationBundle
): HTMLElement {
  const row = document.createElement('div');
  row.className = 'jp-ToolTerminal-agentRow';
  row.dataset.agent = agent.id;
  const label = document.createElement('span');
  label.className = 'jp-ToolTerminal-agentName';
  label.textContent = agent.name;
  const state = document.createElement('span');
  state.className = 'jp-ToolTerminal-agentState';
  state.textContent = agentState(agent, trans);
  state.title = trans.__('Token expires %1', agent.expires);
  const revoke = button(
    trans.__('Revoke'),
    trans.__(
      'Delete the agent: its token stops working at once and its terminals end'
    ),
    'warn'
  );
  onClickCall(
    revoke,
    () => deleteAgent(agent.id, model.serverSettings),
    trans.__('Could not revoke %1', agent.name),
    () => {
      state.textContent = trans.__('revoked');
      revoke.remove();
      void model.refresh().catch(() => undefined);
    }
  );
  row.append(label, state, revoke);
  return row;
}

/**
 * A labelled text with a *Copy* button.
 */
function copyable(
  title: string,
  text: string,
  kind: string,
  trans: TranslationBundle
): HTMLElement {
  const section = document.createElement('div');
  section.className = 'jp-ToolTerminal-copyable';
  section.dataset.kind = kind;
  const header = document.createElement('div');
  header.className = 'jp-ToolTerminal-copyableHeader';
  const label = document.createElement('span');
  label.textContent = title;
  const copy = button(trans.__('Copy'), trans.__('Copy %1', title), 'reject');
  copy.addEventListener('click', () => {
    Clipboard.copyToSystem(text);
    copy.textContent = trans.__('Copied');
  });
  header.append(label, copy);
  const value = document.createElement('pre');
  value.className = 'jp-ToolTerminal-copyableText';
  value.textContent = text;
  section.append(header, value);
  return section;
}
