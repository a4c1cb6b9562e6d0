from model.train.train import main

main()
