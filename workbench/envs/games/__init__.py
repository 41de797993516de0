"""Two-player games with exact solutions, pure Python: Kuhn poker (`kuhn`: exact expected values, best responses,
exploitability and the closed-form Nash equilibria) and tic-tac-toe (`tictactoe`: rules and a memoized minimax
solver). These are the game cores only; they register nothing, and the package imports none of its modules."""
