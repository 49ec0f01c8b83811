// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * Small pieces the agents' dialogs share: a button that runs a server call
 * and says when it failed, and listing the agents with the failure said.
 */

import { showErrorMessage } from '@jupyterlab/apputils';
import type { TranslationBundle } from '@jupyterlab/translation';

import type { IAgentModel } from './api';
import type { AgentsModel } from './model';

/**
 * A styled button.
 *
 * @param label - Its text.
 * @param title - Its tooltip.
 * @param kind - JupyterLab's button style (`warn`, `reject`, `accept`).
 */
export function button(
  label: string,
  title: string,
  kind: string
): HTMLButtonElement {
  const node = document.createElement('button');
  node.type = 'button';
  node.className = `jp-Button jp-mod-styled jp-mod-${kind}`;
  node.textContent = label;
  node.title = title;
  return node;
}

/**
 * Make a button run a server call: disabled while it runs, a dialog with
 * `failure` and the error if it fails (the button is usable again), `done`
 * once it succeeded.
 *
 * @param node - The button.
 * @param call - The server call.
 * @param failure - What could not be done, for the error dialog.
 * @param done - What to show once it is done.
 */
export function onClickCall(
  node: HTMLButtonElement,
  call: () => Promise<unknown>,
  failure: string,
  done: () => void
): void {
  node.addEventListener('click', async () => {
    node.disabled = true;
    try {
      await call();
    } catch (error) {
      node.disabled = false;
      await showErrorMessage(failure, error as Error);
      return;
    }
    done();
  });
}

/**
 * The agents as the server lists them now, or `null` when it cannot (a
 * dialog said why).
 *
 * @param model - The agents model.
 * @param trans - The translation bundle.
 */
export async function listedNow(
  model: AgentsModel,
  trans: TranslationBundle
): Promise<ReadonlyArray<IAgentModel> | null> {
  try {
    await model.refresh();
  } catch (error) {
    await showErrorMessage(
      trans.__('Could not list the agents'),
      error as Error
    );
    return null;
  }
  return model.agents;
}
